package clustertest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for writers and readers on different
// goroutines: a command's or a logger's output that a test reads while it
// is written.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
