package etcdproc

import (
	"context"
	"crypto/rand"
	"encoding/binary"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/etcd-nomad/etcd-nomad/certs"
)

// RandomLeaseID is a gRPC interceptor on the client port that gives a
// lease grant without an id (ID 0: "etcd chooses") a random positive
// 63-bit one. etcd would draw it from the member's request-id counter
// (idutil.Generator: member id, start time, a counter), so a tenant that
// grants a lease of its own finds the leases granted after it a few ids
// on: LeaseTimeToLive without keys answers anyone about any lease. And
// etcd checks a lease only against the keys it holds, so one that holds
// none yet (a concurrency.Session before its first lock) is anyone's who
// knows its id to renew, revoke or attach a key to
// (TestTenantCanTakeAnotherTenantsKeylessLease). A grant that names its
// id keeps it; a random id taken already (odds 2^-63 per lease) is
// refused by etcd as ErrLeaseExist, as a named one would be.
func RandomLeaseID(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*pb.LeaseGrantRequest); ok && r.ID == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		r.ID = int64(binary.BigEndian.Uint64(b[:]) >> 1)
		if r.ID == 0 {
			r.ID = 1
		}
	}
	return handler(ctx, req)
}

// RootLeaseList is a gRPC interceptor on the client port that answers
// LeaseLeases to root alone. etcd answers it to any user while no lease
// holds a key the user may not read, and then lists every lease id:
// another tenant's key-less leases among them. The access block grants no
// one the root role (config refuses it), so root's CN is etcd's only
// administrator; a request through etcd's HTTP gateway arrives on the
// member's own connection (etcd ignores its CN, so does this). Without a
// client certificate (TLS off) etcd decides alone.
func RootLeaseList(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, ok := req.(*pb.LeaseLeasesRequest); ok {
		if cn, ok := clientCN(ctx); ok && cn != certs.RootUser {
			return nil, rpctypes.ErrGRPCPermissionDenied
		}
	}
	return handler(ctx, req)
}

// clientCN is the CN of the verified client certificate ctx's request
// came with ("" through etcd's HTTP gateway); ok is false without one.
func clientCN(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return "", false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return "", false
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md["grpcgateway-accept"]) > 0 {
		return "", true
	}
	return ti.State.VerifiedChains[0][0].Subject.CommonName, true
}
