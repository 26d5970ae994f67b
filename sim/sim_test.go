package sim

import (
	"os"
	"strconv"
	"testing"
)

func TestDebugOne(t *testing.T) {
	r, w := Run(Config{Seed: seedFromEnv(), TraceLen: 300})
	t.Logf("%+v", r)
	if r.Violation != nil {
		t.Fatalf("%v\n%s", r.Violation, w.Trace())
	}
	t.Logf("%s", w.Trace())
}

func seedFromEnv() uint64 {
	s, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	return s
}
