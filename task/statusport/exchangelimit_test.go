package statusport

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func src(s string) netip.Prefix { return sourceOf(s + ":1234") }

// A source's refused requests cost the global bucket nothing; the global
// bucket bounds what all sources together get; a source forgotten past
// maxSources comes back with a full bucket; IPv6 sources count by /64.
func TestExchangeLimiterChargesTheGlobalBucketOnlyPastTheSource(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newExchangeLimiter(1, 10, 1, 3, 4)
	for range 1000 {
		l.allow(src("10.0.0.1"), now)
	}
	for i := range 7 { // 10 global tokens, 3 spent by the flood
		if !l.allow(src(fmt.Sprintf("10.0.1.%d", i/3)), now) {
			t.Fatalf("request %d from other sources refused: the flood spent more than its source's burst of the global bucket", i)
		}
	}
	if l.allow(src("10.0.2.1"), now) {
		t.Fatalf("an 11th request in the same instant was allowed: the global bucket does not bound the sources together")
	}
	if n := l.lru.Len(); n > 4 {
		t.Fatalf("%d sources kept, want at most 4", n)
	}
	if src("[2001:db8::1]") != src("[2001:db8::ffff:1]") || src("[2001:db8::1]") == src("[2001:db8:0:1::1]") {
		t.Fatalf("IPv6 sources are not counted by /64")
	}
	// The flood's source, seen least recently, was forgotten for
	// 10.0.2.1: it starts again with a full bucket.
	if _, kept := l.sources[src("10.0.0.1")]; kept {
		t.Fatalf("the source seen least recently is still kept past maxSources")
	}
	if !l.allow(src("10.0.0.1"), now.Add(3*time.Second)) {
		t.Fatalf("a forgotten source, the global bucket refilled, is refused")
	}
}
