//go:build unix

package file

import "syscall"

// openFlags make an open fail on a symlink in the last element and not
// wait on a FIFO (a store writer's) for a writer that never comes.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
