package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

func TestFillers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kind := range []string{dataObjects, dataHex} {
		f, _, err := fillerFor(kind)
		if err != nil {
			t.Fatal(err)
		}
		a, b := make([]byte, 64<<10), make([]byte, 64<<10)
		f(rng, a)
		f(rng, b)
		if bytes.Equal(a, b) || bytes.Count(a, []byte{0}) > 0 {
			t.Errorf("%s: values repeat or are not filled to the end", kind)
		}
		switch kind {
		case dataHex:
			if _, err := hex.DecodeString(string(a)); err != nil {
				t.Errorf("hex value: %v", err)
			}
		case dataObjects:
			var obj map[string]any
			if err := json.NewDecoder(bytes.NewReader(a)).Decode(&obj); err != nil || obj["kind"] != "ConfigMap" {
				t.Errorf("objects value does not start with a JSON object: %v %v", obj, err)
			}
		}
	}
	if _, _, err := fillerFor("zeros"); err == nil {
		t.Error("unknown contents accepted")
	}
}

func TestMedianAndPercentile(t *testing.T) {
	ms := time.Millisecond
	m := median([]loadResult{{opsPerSec: 300, p99: 9 * ms, errors: 1}, {opsPerSec: 100, p99: 30 * ms}, {opsPerSec: 200, p99: 10 * ms, errors: 2}})
	if m.opsPerSec != 200 || m.p99 != 10*ms || m.errors != 3 {
		t.Errorf("odd median = %+v", m)
	}
	m = median([]loadResult{{opsPerSec: 100, p99: 10 * ms}, {opsPerSec: 200, p99: 20 * ms}})
	if m.opsPerSec != 150 || m.p99 != 15*ms {
		t.Errorf("even median = %+v", m)
	}
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*ms)
	}
	if p := percentile(ds, 0.99); p != 99*ms {
		t.Errorf("p99 of 1..100ms = %s", p)
	}
	if p := percentile(nil, 0.99); p != 0 {
		t.Errorf("p99 of nothing = %s", p)
	}
}

func TestMedianTimes(t *testing.T) {
	m := medianTimes([]nomadTimes{{bootstrap: 9, roll: 40}, {bootstrap: 12, roll: 60}, {bootstrap: 10, roll: 45}})
	if m.bootstrap != 10 || m.roll != 45 {
		t.Errorf("odd median = %+v", m)
	}
	if m = medianTimes([]nomadTimes{{replace: 10}, {replace: 14}}); m.replace != 12 {
		t.Errorf("even median = %+v", m)
	}
}
