package etcdproc

import (
	"context"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// localMemberGone is the message etcd panics with when a request asks
// whether this member is a learner after raft applied its removal
// (membership.RaftCluster.IsLocalMemberLearner; etcd-io/etcd#21966, open
// for v3.6.16).
const localMemberGone = "failed to find local ID in cluster members"

// RemovedMemberPanic is a gRPC interceptor on the client port that turns
// etcd's panic for a request racing this member's own removal into an
// error. Between raft applying the removal of the local member and the
// server stopping, a Maintenance/Status request (etcd-nomad's own probes,
// etcdctl endpoint status, any client's) reaches IsLocalMemberLearner,
// which panics: the process died with exit code 2 while it held the
// coordinator's lock for its departure, and every other member waited
// out the session's TTL and lock delay for it (e2e
// TestScaleWithNomadJobRun: two more departures missed their deadline
// and stopped as members, the cluster lost its quorum for 9 s). The
// panic unwinds through the cluster's deferred unlock, so nothing is
// left half-done; the request gets ErrGRPCMemberNotFound, as a removed
// member answers anyway. Any other panic goes on.
//
// It must run before etcd's own interceptors (grpc.UnaryInterceptor, not
// a chained one): their learner check for every request races the
// removal the same way.
func RemovedMemberPanic(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer recoverRemoved(&err)
	return handler(ctx, req)
}

// RemovedMemberStreamPanic is RemovedMemberPanic for streams (watches,
// lease keepalives, snapshots), whose learner check races the same way.
func RemovedMemberStreamPanic(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer recoverRemoved(&err)
	return handler(srv, ss)
}

// recoverRemoved turns etcd's panic for a removed local member into
// ErrGRPCMemberNotFound in *err and lets any other panic go on.
func recoverRemoved(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if msg, ok := r.(string); ok && msg == localMemberGone {
		*err = rpctypes.ErrGRPCMemberNotFound
		return
	}
	panic(r)
}
