// Package datadir is a member's directory on disk: the data in use with
// the metadata naming its cluster incarnation, the data set aside (renamed,
// never deleted), and a snapshot installed as the next incarnation. It
// reads etcd's stopped backend (revision, learner, storage version) but
// never opens a running one, and never deletes data.
package datadir
