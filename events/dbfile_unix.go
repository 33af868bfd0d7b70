//go:build unix

package events

import (
	"os"
	"syscall"
)

// hardLinks is how many names the file fi describes has (1 when unknown).
func hardLinks(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
