package chaos

import (
	"path/filepath"
	"testing"

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
