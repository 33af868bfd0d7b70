//go:build !cgo || !(linux || darwin)

package events

// sqliteVFS is SQLite's default VFS here: walbuf.c is built for Linux and
// macOS only.
func sqliteVFS() string { return "" }

// walbufCommits is 0: there is no buffer here.
func walbufCommits() int64 { return 0 }
