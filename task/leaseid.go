package task

import (
	"context"
	"crypto/rand"
	"encoding/binary"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// randomLeaseID is a gRPC interceptor on the client port that gives a
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
func randomLeaseID(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
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
