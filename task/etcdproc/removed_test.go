package etcdproc

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// A request that asks etcd's own membership whether this member is a
// learner after its removal was applied gets an error instead of killing
// the process (etcd-io/etcd#21966); the panic is etcd's real one.
func TestARequestRacingThisMembersRemovalDoesNotKillTheProcess(t *testing.T) {
	c := membership.NewCluster(zap.NewNop())
	c.SetID(types.ID(0x4aed), types.ID(0x4e61)) // local member 4aed, not (any more) in the membership
	status := func(context.Context, any) (any, error) {
		return c.IsLocalMemberLearner(), nil
	}
	func() {
		defer func() {
			if r := recover(); r != localMemberGone {
				t.Fatalf("etcd's panic is %v, want %q: the interceptor no longer matches it", r, localMemberGone)
			}
		}()
		_, _ = status(context.Background(), nil)
	}()

	resp, err := RemovedMemberPanic(context.Background(), nil, nil, status)
	if !errors.Is(err, rpctypes.ErrGRPCMemberNotFound) || resp != nil {
		t.Fatalf("got %v, %v; want ErrGRPCMemberNotFound", resp, err)
	}
}

// Any other panic is not ours to swallow.
func TestOtherPanicsGoOn(t *testing.T) {
	defer func() {
		if r := recover(); r != "something else" {
			t.Fatalf("recovered %v, want the handler's own panic", r)
		}
	}()
	_, _ = RemovedMemberPanic(context.Background(), nil, nil, func(context.Context, any) (any, error) { panic("something else") })
	t.Fatal("the handler's panic was swallowed")
}

// The same for a stream (a watch or keepalive opened in the window).
func TestAStreamRacingThisMembersRemovalDoesNotKillTheProcess(t *testing.T) {
	c := membership.NewCluster(zap.NewNop())
	c.SetID(types.ID(0x4aed), types.ID(0x4e61))
	err := RemovedMemberStreamPanic(nil, nil, nil, func(any, grpc.ServerStream) error {
		c.IsLocalMemberLearner()
		return nil
	})
	if !errors.Is(err, rpctypes.ErrGRPCMemberNotFound) {
		t.Fatalf("got %v, want ErrGRPCMemberNotFound", err)
	}
}
