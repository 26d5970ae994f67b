//go:build !unix

package certs

// oNoFollow is not available here: replaceFile's Lstat and O_EXCL remain.
const oNoFollow = 0
