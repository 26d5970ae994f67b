//go:build !unix

package file

// openFlags: no O_NOFOLLOW nor O_NONBLOCK here; openRegular's check of
// the opened file's type remains.
const openFlags = 0
