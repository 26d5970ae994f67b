package planner

import (
	"reflect"
	"testing"
)

// offRules lists the rules f turns off, by guard, scanning each rule type
// past its last constant (a rule no case names holds).
func offRules(f Faults) []string {
	var off []string
	for i := 0; i < 32; i++ {
		for guard, holds := range map[string]bool{
			"seed":     f.seedGuard(seedRule(i)),
			"change":   f.changeGuard(changeRule(i)),
			"recovery": f.recoveryGuard(recoveryRule(i)),
			"takeover": f.takeoverGuard(takeoverRule(i)),
			"resume":   f.resumeGuard(resumeRule(i)),
			"data":     f.dataGuard(dataRule(i)),
			"hold":     f.holdGuard(holdRule(i)),
			"operator": f.operatorGuard(operatorRule(i)),
			"backup":   f.backupGuard(backupRule(i)),
			"leave":    f.leaveGuard(leaveRule(i)),
		} {
			if !holds {
				off = append(off, guard+"/"+string(rune('0'+i)))
			}
		}
	}
	return off
}

// TestGuardsReadEverySwitch: with no switch set every rule holds, and each
// Faults switch turns off at least one rule of one guard only: a switch no
// guard reads would leave its broken planner unbroken (and its proof in
// sim and the checker meaningless), one read by two guards belongs to no
// family.
func TestGuardsReadEverySwitch(t *testing.T) {
	if off := offRules(Faults{}); len(off) != 0 {
		t.Fatalf("the zero Faults turns off %v", off)
	}
	ft := reflect.TypeOf(Faults{})
	for i := 0; i < ft.NumField(); i++ {
		var f Faults
		reflect.ValueOf(&f).Elem().Field(i).SetBool(true)
		off := offRules(f)
		if len(off) == 0 {
			t.Errorf("Faults.%s turns off no rule: no guard reads it", ft.Field(i).Name)
			continue
		}
		guards := map[string]bool{}
		for _, r := range off {
			guards[r[:len(r)-2]] = true
		}
		if len(guards) != 1 {
			t.Errorf("Faults.%s turns off rules of several guards: %v", ft.Field(i).Name, off)
		}
	}
}
