package planner

import (
	"strings"
	"testing"
	"time"
)

// Review rev19b D: m3, empty, no record, every listed peer empty and
// answering, nothing named: its write of the data holders it remembers
// (b, collected a moment ago while it may run behind a partition) failed
// (disk full, read-only remount). Before, the failure was only logged and
// a restart, reading nothing, seeded beside b. The seed waits while the
// write fails, naming the file and the error, and awaits the operator
// once it has failed for the recovery grace; SeedWithHoldersUnsaved
// reverts that.
func TestASeedWaitsWhileTheHoldersMemoryCannotBeWritten(t *testing.T) {
	o := Observation{ClusterName: "c", Self: Self{Name: "m3"}, Local: Local{Empty: true}, HoldsLock: true, NewToken: "tok19",
		RecoveryGrace:     20 * time.Second,
		Instances:         []Instance{{Name: "m3"}, {Name: "m4"}},
		Peers:             []PeerStatus{{Name: "m4"}},
		HoldersUnsaved:    "holders file /data/m3/holders.json not written: no space left on device",
		HoldersUnsavedFor: 5 * time.Second}
	d := Plan(o)
	if d.Kind != Wait || d.AwaitsOperator || !strings.Contains(d.Reason, "/data/m3/holders.json") || !strings.Contains(d.Reason, "no space left") {
		t.Fatalf("with the holders write failing for 5s: %s (awaits operator %v: %s), want a wait naming the file and the error", d.Kind, d.AwaitsOperator, d.Reason)
	}
	o.HoldersUnsavedFor = o.RecoveryGrace
	if d := Plan(o); d.Kind != Wait || !d.AwaitsOperator || !strings.Contains(d.Reason, "writable") {
		t.Fatalf("with the holders write failing for the grace: %s (awaits operator %v: %s), want the operator asked to make the directory writable", d.Kind, d.AwaitsOperator, d.Reason)
	}
	if bad := (Faults{SeedWithHoldersUnsaved: true}).Plan(o); bad.Kind != Seed {
		t.Fatalf("with SeedWithHoldersUnsaved: %s (%s), want the seed of the defect", bad.Kind, bad.Reason)
	}
	o.HoldersUnsaved, o.HoldersUnsavedFor = "", 0
	if d := Plan(o); d.Kind != Seed {
		t.Fatalf("with the holders written: %s (%s), want the seed", d.Kind, d.Reason)
	}
}
