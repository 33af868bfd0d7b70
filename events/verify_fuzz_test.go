package events_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentctl/agentctl/events"
)

// FuzzVerifyStream feeds arbitrary bytes to VerifyStream, the offline
// `agentctl audit verify` path that reads files from anywhere. It must
// never panic; every failure is a *ChainError; a success means the file
// holds exactly the header's event count and ends on its final hash; and
// the answer does not depend on how the reader splits the bytes.
//
// Seeds: testdata/fuzz/FuzzVerifyStream (a real export, tampered copies,
// odd encodings) plus a fresh export made here. Run it long with
//
//	go test ./events -run '^$' -fuzz '^FuzzVerifyStream$' -fuzztime 10m
func FuzzVerifyStream(f *testing.F) {
	db, err := events.Open(context.Background(), filepath.Join(f.TempDir(), "a.db"), events.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	recs := []events.Record{
		{Stream: "run", Type: "run.created", Payload: map[string]string{"digest": "sha256:abc"}},
		{Stream: "call/x", Type: "call.frame", Payload: map[string]any{"body": "é \u2028 <&> \"q\" \x7f", "n": 1.5e300}},
		{Stream: "run", Type: "run.finished", Payload: nil},
	}
	for _, r := range recs {
		if _, err := db.Append(ctx, "run-fuzz", []events.Record{r}, nil); err != nil {
			f.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := db.Export(ctx, &buf, "run-fuzz"); err != nil {
		f.Fatal(err)
	}
	good := buf.String()
	if n, _, err := events.VerifyStream(strings.NewReader(good)); err != nil || n != int64(len(recs)) {
		f.Fatalf("the seed export does not verify: %d, %v", n, err)
	}
	f.Add([]byte(good))
	f.Add([]byte(strings.ReplaceAll(good, "\n", "\r\n")))
	f.Add([]byte(strings.TrimSuffix(good, "\n")))
	f.Add([]byte(strings.SplitAfter(good, "\n")[0]))
	// The forgeries of issue 13 item 6: a case-variant duplicate member, a
	// zeroed workflowDigest, a signed export.
	f.Add([]byte(strings.Replace(good, `"payload":`, `"payload":"{}","PAYLOAD":`, 1)))
	f.Add([]byte(strings.Replace(good, `"workflowDigest":"sha256:abc"`, `"workflowDigest":"sha256:000"`, 1)))
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	buf.Reset()
	if _, err := db.ExportWith(ctx, &buf, "run-fuzz", events.ExportOptions{SignKey: key}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())

	f.Fuzz(func(t *testing.T, data []byte) {
		n, h, err := events.VerifyStream(bytes.NewReader(data))
		if err != nil {
			var ce *events.ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *ChainError", err, err)
			}
			if ce.Seq < 0 || n < 0 {
				t.Fatalf("negative seq %d or count %d", ce.Seq, n)
			}
			if ce.Seq > 0 && h == nil {
				t.Fatalf("error at seq %d without a header", ce.Seq)
			}
		} else {
			if h == nil || (h.Format != events.AuditFormat && h.Format != events.AuditFormatV1) {
				t.Fatalf("verified without a valid header: %+v", h)
			}
			if n != h.EventCount {
				t.Fatalf("verified %d events, header says %d", n, h.EventCount)
			}
			if n > int64(bytes.Count(data, []byte("\n"))+1) {
				t.Fatalf("verified %d events from %d lines", n, bytes.Count(data, []byte("\n"))+1)
			}
		}
		// The same bytes, one at a time: the same answer.
		n2, _, err2 := events.VerifyStream(iotest.OneByteReader(bytes.NewReader(data)))
		if n2 != n || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("split reads changed the answer: %d, %v then %d, %v", n, err, n2, err2)
		}
	})
}
