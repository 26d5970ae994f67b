//go:build unix

package certs

import "syscall"

// oNoFollow makes an open fail on a symlink in the last element.
const oNoFollow = syscall.O_NOFOLLOW
