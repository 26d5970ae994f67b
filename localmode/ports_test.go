package localmode

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortsAreNotHandedOutTwice takes 300 ports in this process and
// 300 in another at the same time: no port is handed to both, nor twice
// here. Without the leases two random draws of 300 from the 5,000 ports
// share about 18.
func TestFreePortsAreNotHandedOutTwice(t *testing.T) {
	if os.Getenv("PORTS_CHILD") == "1" {
		ps, err := FreePorts(300)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, p := range ps {
			b.WriteString(strconv.Itoa(p) + " ")
		}
		os.Stdout.WriteString("PORTS " + b.String() + "\n")
		return
	}
	t.Setenv("TMPDIR", t.TempDir()) // leases of this test only
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortsAreNotHandedOutTwice$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PORTS_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	seen := map[int]string{}
	for _, f := range strings.Fields(childPorts(t, string(out))) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		seen[p] = "the other process"
	}
	if len(seen) != 300 {
		t.Fatalf("child handed out %d distinct ports, want 300", len(seen))
	}
	for round := 0; round < 3; round++ {
		ps, err := FreePorts(100)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if who, ok := seen[p]; ok {
				t.Fatalf("port %d handed out again; %s holds it", p, who)
			}
			seen[p] = "this process"
		}
	}
}

func childPorts(t *testing.T, out string) string {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "PORTS "); ok {
			return rest
		}
	}
	t.Fatalf("no ports in the child's output:\n%s", out)
	return ""
}
