package chaos

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

type step struct {
	client    int
	in        Input
	out       Output
	call, ret int64
}

func check(t *testing.T, steps []step) porcupine.CheckResult {
	t.Helper()
	h := NewHistory()
	for _, s := range steps {
		h.Add(s.client, s.in, s.out, s.call, s.ret)
	}
	res, err := h.Check(0, filepath.Join(t.TempDir(), "viz.html"))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func put(c int, k, v string, call, ret int64) step {
	return step{c, Input{Kind: Put, Key: k, Value: v}, Output{}, call, ret}
}

func get(c int, k, v string, call, ret int64) step {
	return step{c, Input{Kind: Get, Key: k}, Output{Value: v}, call, ret}
}

func cas(c int, k, expect, v string, ok bool, read string, call, ret int64) step {
	return step{c, Input{Kind: CAS, Key: k, Expect: expect, Value: v}, Output{OK: ok, Value: read}, call, ret}
}

func unknown(s step) step { s.out = Output{Unknown: true}; return s }

func TestModel(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
		want  porcupine.CheckResult
	}{
		{"sequential put get", []step{put(0, "a", "1", 0, 10), get(1, "a", "1", 20, 30)}, porcupine.Ok},
		{"concurrent read may see old or new", []step{put(0, "a", "1", 0, 10), put(0, "a", "2", 20, 40), get(1, "a", "1", 25, 30)}, porcupine.Ok},
		{"stale read after acknowledged put", []step{put(0, "a", "1", 0, 10), put(0, "a", "2", 20, 30), get(1, "a", "1", 40, 50)}, porcupine.Illegal},
		{"acknowledged put lost", []step{put(0, "a", "1", 0, 10), get(1, "a", "", 20, 30)}, porcupine.Illegal},
		{"keys are independent", []step{put(0, "a", "1", 0, 10), get(1, "b", "", 20, 30)}, porcupine.Ok},
		{"cas succeeds on expected value", []step{put(0, "a", "1", 0, 10), cas(1, "a", "1", "2", true, "", 20, 30), get(0, "a", "2", 40, 50)}, porcupine.Ok},
		{"cas cannot succeed on another value", []step{put(0, "a", "1", 0, 10), cas(1, "a", "0", "2", true, "", 20, 30)}, porcupine.Illegal},
		{"failed cas reads the current value", []step{put(0, "a", "1", 0, 10), cas(1, "a", "0", "2", false, "1", 20, 30)}, porcupine.Ok},
		{"failed cas with a wrong read", []step{put(0, "a", "1", 0, 10), cas(1, "a", "0", "2", false, "3", 20, 30)}, porcupine.Illegal},
		{"two cas from one value both succeed", []step{put(0, "a", "1", 0, 10), cas(1, "a", "1", "2", true, "", 20, 30), cas(2, "a", "1", "3", true, "", 20, 30)}, porcupine.Illegal},
		{"unknown put may be applied later", []step{unknown(put(0, "a", "1", 0, 10)), get(1, "a", "", 20, 30), get(1, "a", "1", 40, 50)}, porcupine.Ok},
		{"unknown put may never apply", []step{unknown(put(0, "a", "1", 0, 10)), get(1, "a", "", 20, 30)}, porcupine.Ok},
		{"unknown put cannot apply before its call", []step{get(1, "a", "1", 0, 5), unknown(put(0, "a", "1", 10, 20))}, porcupine.Illegal},
		{"unknown put applied once only", []step{put(2, "a", "0", 0, 1), unknown(put(0, "a", "1", 2, 3)), get(1, "a", "1", 10, 11), put(2, "a", "2", 12, 13), get(1, "a", "1", 14, 15)}, porcupine.Illegal},
		{"unknown cas applies only from its expected value", []step{put(0, "a", "1", 0, 10), unknown(cas(1, "a", "0", "2", false, "", 20, 30)), get(0, "a", "2", 40, 50)}, porcupine.Illegal},
		{"unknown get is dropped", []step{put(0, "a", "1", 0, 10), unknown(get(1, "a", "9", 20, 30))}, porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(t, c.steps); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// The job review's item 9: the load's keys rotate every round and were
// never read again, so a write acknowledged in round r and lost to round
// r+1's fault went unseen. ReadBack puts a final read of every key into
// the history, which then contradicts the lost write.
func TestReadBackCatchesAWriteLostInAnEarlierRound(t *testing.T) {
	h := NewHistory()
	h.Add(0, Input{Kind: Put, Key: "chaos/r000/k0", Value: "c0-1"}, Output{}, h.Now(), h.Now())
	h.Add(0, Input{Kind: Put, Key: "chaos/r001/k0", Value: "c0-2"}, Output{}, h.Now(), h.Now())
	store := map[string]string{"chaos/r001/k0": "c0-2"} // round 0's write is gone
	fails := 2
	get := func(_ context.Context, key string) (string, error) {
		if fails > 0 {
			fails--
			return "", errors.New("etcdserver: request timed out")
		}
		return store[key], nil
	}
	if res, _ := h.Check(0, ""); res != porcupine.Ok {
		t.Fatalf("before the read back: %s, want ok (nothing reads the lost key)", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.ReadBack(ctx, 99, []string{"chaos/r000/k0", "chaos/r001/k0"}, time.Millisecond, get); err != nil {
		t.Fatal(err)
	}
	if res, _ := h.Check(0, filepath.Join(t.TempDir(), "viz.html")); res != porcupine.Illegal {
		t.Fatalf("after the read back: %s, want illegal (an acknowledged put of round 0 is lost)", res)
	}
	store["chaos/r000/k0"] = "c0-1"
	h2 := NewHistory()
	h2.Add(0, Input{Kind: Put, Key: "chaos/r000/k0", Value: "c0-1"}, Output{}, h2.Now(), h2.Now())
	if err := h2.ReadBack(ctx, 99, []string{"chaos/r000/k0"}, time.Millisecond, get); err != nil {
		t.Fatal(err)
	}
	if res, _ := h2.Check(0, ""); res != porcupine.Ok {
		t.Fatalf("kept write read back: %s, want ok", res)
	}
	never := func(context.Context, string) (string, error) { return "", errors.New("unavailable") }
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer scancel()
	if err := NewHistory().ReadBack(sctx, 99, []string{"k"}, time.Millisecond, never); err == nil {
		t.Fatal("reads that never answer: no error")
	}
}
