package tspeer

import (
	"strings"
	"testing"
)

func TestLoopbackListeners(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	for _, tc := range []struct {
		name, table string
		n           int
		wantErr     bool
	}{
		{"loopback", header + "   0: 0100007F:94EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 22420 1\n", 1, false},
		{"any4", header + "   0: 00000000:94EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 22420 1\n", 0, true},
		{"any6", header + "   0: 00000000000000000000000000000000:94EB 00000000000000000000000000000000:0000 0A 0 0 0 0 0 0 1\n", 0, true},
		{"other port", header + "   0: 00000000:1F90 00000000:0000 0A 0 0 0 0 0 0 1\n", 0, false},
		{"established to port", header + "   0: 0100007F:C350 0100007F:94EB 01 0 0 0 0 0 0 1\n", 0, false},
	} {
		n, err := loopbackListeners(strings.NewReader(tc.table), 0x94EB)
		if n != tc.n || (err != nil) != tc.wantErr {
			t.Errorf("%s: n=%d err=%v, want n=%d err=%v", tc.name, n, err, tc.n, tc.wantErr)
		}
	}
}
