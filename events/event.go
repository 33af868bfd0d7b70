package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Event is one row of the log as stored.
type Event struct {
	RunID     string `db:"run_id" json:"runId"`
	Seq       int64  `db:"seq" json:"seq"`
	Stream    string `db:"stream" json:"stream"`
	Type      string `db:"type" json:"type"`
	Payload   string `db:"payload" json:"payload"`
	CreatedAt string `db:"created_at" json:"createdAt"`
	PrevHash  string `db:"prev_hash" json:"prevHash"`
	Hash      string `db:"hash" json:"hash"`

	codec *codec // decrypts Payload; set by the DB that read or wrote the event
	// value is the Go value this process appended as Payload (nil when it
	// was read, or appended as bytes): Decode into the same type copies it
	// instead of parsing JSON the appender just wrote.
	value any
}

// Record is an event to append; Payload is marshalled to JSON unless it is
// already json.RawMessage or []byte.
type Record struct {
	Stream  string
	Type    string
	Payload any
}

// Decode unmarshals the payload into v, decrypting an encrypted payload
// with the key of the database the event came from. A missing or wrong key,
// and plaintext and ciphertext mixed, are *Error (storage, exit 5).
func (e Event) Decode(v any) error {
	if e.value != nil {
		if dst := reflect.ValueOf(v); dst.Kind() == reflect.Pointer && !dst.IsNil() && dst.Elem().Type() == reflect.TypeOf(e.value) {
			dst.Elem().Set(reflect.ValueOf(e.value))
			return nil
		}
	}
	payload, err := e.codec.open(e)
	if err != nil {
		return &Error{Op: fmt.Sprintf("decode %s payload at seq %d of run %s", e.Type, e.Seq, e.RunID), Err: err}
	}
	if err := json.Unmarshal([]byte(payload), v); err != nil {
		return fmt.Errorf("decode %s payload at seq %d: %w", e.Type, e.Seq, err)
	}
	return nil
}

// Sealed reports whether the payload is stored encrypted: a projection of
// it (a table column) must not keep its remote text in clear.
func (e Event) Sealed() bool { return strings.HasPrefix(e.Payload, envelopePrefix) }

// Plaintext returns the payload as JSON text, decrypting an encrypted one,
// with the same errors as Decode; for readers that parse it themselves.
func (e Event) Plaintext() (string, error) {
	payload, err := e.codec.open(e)
	if err != nil {
		return "", &Error{Op: fmt.Sprintf("decode %s payload at seq %d of run %s", e.Type, e.Seq, e.RunID), Err: err}
	}
	return payload, nil
}

// PayloadAppender is a payload type that writes its own JSON, the bytes
// encoding/json would write, because it is encoded on a hot path (frames).
type PayloadAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

func marshalPayload(p any) (string, error) {
	switch v := p.(type) {
	case nil:
		return "{}", nil
	case json.RawMessage:
		return string(v), nil
	case []byte:
		return string(v), nil
	case PayloadAppender:
		b, err := v.AppendJSON(make([]byte, 0, 512))
		return string(b), err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}
