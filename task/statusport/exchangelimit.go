package statusport

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// exchangeLimiter paces the exchange before anything of a request is
// read, in two steps:
//
//  1. each source (sourceOf: an IPv4 address, an IPv6 /64) has its own
//     bucket (exchangeSourceRate, ExchangeSourceBurst): a source's flood
//     spends its own tokens, never another's;
//  2. a request its source's bucket let through is charged to the global
//     bucket (exchangeRate, exchangeBurst), which bounds the member's
//     work (a signature per answer) however many sources ask.
//
// A request refused at step 1 costs the global bucket nothing, so one
// peer's flood takes at most exchangeSourceRate of the global rate: it
// takes exchangeRate/exchangeSourceRate sources flooding together to
// lock the other workloads out. The buckets of at most maxSources
// sources are kept; past that the source seen least recently is
// forgotten (it starts again with a full bucket), which bounds the
// memory a peer with many addresses can make the member hold.
type exchangeLimiter struct {
	sourceRate  rate.Limit
	sourceBurst int
	maxSources  int

	mu      sync.Mutex
	global  *rate.Limiter
	sources map[netip.Prefix]*list.Element // of *sourceBucket, in lru
	lru     *list.List                     // front: seen most recently
}

type sourceBucket struct {
	source netip.Prefix
	lim    *rate.Limiter
}

func newExchangeLimiter(global rate.Limit, globalBurst int, source rate.Limit, sourceBurst, maxSources int) *exchangeLimiter {
	return &exchangeLimiter{sourceRate: source, sourceBurst: sourceBurst, maxSources: maxSources,
		global: rate.NewLimiter(global, globalBurst), sources: map[netip.Prefix]*list.Element{}, lru: list.New()}
}

// allow reports whether a request from source may be served at now.
func (l *exchangeLimiter) allow(source netip.Prefix, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *sourceBucket
	if e, ok := l.sources[source]; ok {
		l.lru.MoveToFront(e)
		b = e.Value.(*sourceBucket)
	} else {
		if l.lru.Len() >= l.maxSources {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.sources, old.Value.(*sourceBucket).source)
		}
		b = &sourceBucket{source: source, lim: rate.NewLimiter(l.sourceRate, l.sourceBurst)}
		l.sources[source] = l.lru.PushFront(b)
	}
	if !b.lim.AllowN(now, 1) {
		return false
	}
	return l.global.AllowN(now, 1)
}
