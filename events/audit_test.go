package events_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

func exportRun(t *testing.T, n int) (string, *events.AuditHeader) {
	t.Helper()
	return exportRunOn(t, mustOpen(t, filepath.Join(t.TempDir(), "a.db")), n)
}

func exportRunOn(t *testing.T, db *events.DB, n int) (string, *events.AuditHeader) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Append(ctx, "run-a", []events.Record{{Stream: "run", Type: "run.created", Payload: map[string]string{"digest": "sha256:abc"}}}, nil); err != nil {
		t.Fatal(err)
	}
	appendN(t, db, "run-a", n-1)
	appendN(t, db, "run-b", 2) // another run must not leak into the export
	var buf bytes.Buffer
	h, err := db.Export(ctx, &buf, "run-a")
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	return buf.String(), h
}

func TestAudit_ExportThenVerify(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testExportThenVerify(t, b.Open(t, events.Options{})) })
}

func testExportThenVerify(t *testing.T, db *events.DB) {
	out, h := exportRunOn(t, db, 5)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("export has %d lines, want 6:\n%s", len(lines), out)
	}
	if !strings.HasPrefix(lines[0], `{"format":"agentctl.audit/v2","runId":"run-a","workflowDigest":"sha256:abc","eventCount":5,"finalHash":"v2:`) ||
		!strings.HasSuffix(lines[0], `","chain":"v2"}`) {
		t.Fatalf("header = %s", lines[0])
	}
	if !strings.HasPrefix(lines[1], `{"run_id":"run-a","seq":1,"stream":"run","type":"run.created","created_at":"`) {
		t.Fatalf("first event line = %s", lines[1])
	}
	n, got, err := events.VerifyStream(strings.NewReader(out))
	if err != nil || n != 5 || got.FinalHash != h.FinalHash {
		t.Fatalf("verify = %d, %+v, %v; want 5 events, final %s", n, got, err, h.FinalHash)
	}
}

func TestAudit_VerifyCatchesTampering(t *testing.T) {
	out, _ := exportRun(t, 5)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	with := func(i int, s string) string {
		ls := append([]string(nil), lines...)
		ls[i] = s
		return join(ls)
	}
	tamperByte := func(line int, marker string) string {
		i := strings.Index(lines[line], marker)
		if i < 0 {
			t.Fatalf("marker %q not in line %d", marker, line)
		}
		b := []byte(lines[line])
		b[i+len(marker)] ^= 0x01 // one bit of one byte
		return with(line, string(b))
	}
	for _, tc := range []struct {
		name    string
		file    string
		wantSeq int64
	}{
		{"payload byte", tamperByte(3, `"payload":"{\"i\":`), 3},
		{"type byte", tamperByte(2, `"type":"test.s`), 2},
		{"hash byte", tamperByte(4, `"hash":"`), 4},
		{"prev_hash byte", tamperByte(5, `"prev_hash":"`), 5},
		{"dropped line", join(append(append([]string(nil), lines[:3]...), lines[4:]...)), 3},
		{"dropped last line", join(lines[:5]), 5},
		{"reordered lines", join([]string{lines[0], lines[1], lines[3], lines[2], lines[4], lines[5]}), 2},
		{"header count", with(0, strings.Replace(lines[0], `"eventCount":5`, `"eventCount":4`, 1)), 5},
		{"blank line", join([]string{lines[0], lines[1], "", lines[2]}), 2},
		{"broken json", with(2, lines[2][:len(lines[2])-1]), 2},
		{"unknown member", with(2, strings.Replace(lines[2], `"seq":2`, `"seq":2,"x":1`, 1)), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := events.VerifyStream(strings.NewReader(tc.file))
			var ce *events.ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("verify err = %v, want a *ChainError", err)
			}
			if ce.Seq != tc.wantSeq {
				t.Fatalf("first bad seq = %d (%v), want %d", ce.Seq, err, tc.wantSeq)
			}
		})
	}
}

func TestAudit_VerifyRejectsBadHeader(t *testing.T) {
	for _, file := range []string{"", "not json\n", `{"format":"other/v1"}` + "\n"} {
		_, _, err := events.VerifyStream(strings.NewReader(file))
		var ce *events.ChainError
		if !errors.As(err, &ce) || ce.Seq != 0 {
			t.Errorf("verify %q: err = %v, want a *ChainError at seq 0", file, err)
		}
	}
}

func TestAudit_ExportUnknownRun(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "a.db"))
	var buf bytes.Buffer
	if _, err := db.Export(context.Background(), &buf, "run-nope"); !errors.Is(err, events.ErrNoRun) || buf.Len() != 0 {
		t.Fatalf("export unknown run: err = %v, wrote %d bytes", err, buf.Len())
	}
}
