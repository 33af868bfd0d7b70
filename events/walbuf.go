//go:build cgo && (linux || darwin)

package events

/*
#cgo linux LDFLAGS: -Wl,--unresolved-symbols=ignore-all
#cgo darwin LDFLAGS: -Wl,-undefined,dynamic_lookup
#include <stdlib.h>
int agentctl_walbuf_register(const char *name);
long long agentctl_walbuf_commits(void);
*/
import "C"

import (
	"os"
	"sync"
	"unsafe"
)

// sqliteVFS is the VFS agentctl opens SQLite databases with: walbuf.c's,
// which is the platform's default VFS with a WAL file's writes coalesced
// into one write per commit (a call's commit was twenty pwrite(2)s), or ""
// (SQLite's default) where it cannot be registered or
// AGENTCTL_SQLITE_WALBUF=off asks for the default (to compare the two).
var sqliteVFS = sync.OnceValue(func() string {
	if os.Getenv("AGENTCTL_SQLITE_WALBUF") == "off" {
		return ""
	}
	name := C.CString("agentctl-walbuf") // never freed: SQLite keeps the pointer
	if rc := C.agentctl_walbuf_register(name); rc != 0 {
		C.free(unsafe.Pointer(name))
		return ""
	}
	return C.GoString(name)
})

// walbufCommits is how many commits this process wrote through walbuf.c's
// buffer: tests check that it is in use.
func walbufCommits() int64 { return int64(C.agentctl_walbuf_commits()) }
