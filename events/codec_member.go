package events

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/internal/jsonscan"
)

// Sealed members (issue 27 item 9). A run.created payload stays readable
// without the key (`audit verify` reads its workflow digest, `runs list`
// its name), but the run's inputs are what a user typed and may be as
// private as the arguments built from them: with encryption enabled, the
// value of its top-level "inputs" member is stored as an envelope object
// of its own, sealed with the additional data
// "events.payload|run.created.inputs|<run id>" (bound to its run), and
// Decode puts the value back. The chain hashes the payload as stored, so
// it verifies without the key either way.
//
// A run.created whose inputs are in clear is read as written: a run
// recorded before encryption was enabled, or by a binary that did not seal
// inputs yet (their hashes are unchanged, and their logs verify as before).
// Inputs encode as an object whose keys encoding/json sorts, so a clear
// value never begins like an envelope ({"v":1,"alg":…): "v" sorts after "alg").

// sealedMember names the member of an event type's payload that is sealed
// on its own, "" for none.
func sealedMember(typ string) string {
	if typ == "run.created" {
		return "inputs"
	}
	return ""
}

func memberAAD(typ, member, runID string) []byte {
	return []byte(payloadAAD + "|" + typ + "." + member + "|" + runID)
}

// sealMember returns payload (an event of type typ in runID, one JSON
// object as the appender encoded it) with the value of member replaced by
// its envelope; payload unchanged when it has no such member.
func (c *codec) sealMember(runID, typ, member, payload string) (string, error) {
	from, to, ok := memberSpan(payload, member)
	if !ok {
		return payload, nil
	}
	env, err := c.sealAAD(runID, payload[from:to], memberAAD(typ, member, runID))
	if err != nil {
		return "", err
	}
	return payload[:from] + env + payload[to:], nil
}

// openMember returns e's payload with its sealed member's value decrypted,
// enforcing the fail-closed rules of whole payloads on the envelope.
func (c *codec) openMember(e Event, member string) (string, error) {
	if !strings.Contains(e.Payload, envelopePrefix) {
		return e.Payload, nil // the common case without encryption
	}
	from, to, ok := memberSpan(e.Payload, member)
	if !ok || !strings.HasPrefix(e.Payload[from:to], envelopePrefix) {
		return e.Payload, nil // in clear: recorded before inputs were sealed
	}
	switch {
	case c == nil:
		return "", fmt.Errorf("%w: the %s of %s is encrypted and this event carries no key", ErrKeyRequired, member, e.Type)
	case !c.enabled:
		return "", fmt.Errorf("%w: encrypted %s of %s in a database without encryption", ErrMixedPayload, member, e.Type)
	case c.legacy[e.RunID]:
		return "", fmt.Errorf("%w: encrypted %s of %s in run %s, recorded before encryption was enabled", ErrMixedPayload, member, e.Type, e.RunID)
	case c.aead == nil:
		return "", c.keyErr
	}
	pt, err := c.decrypt(e.Payload[from:to], memberAAD(e.Type, member, e.RunID))
	if err != nil {
		return "", fmt.Errorf("%s of %s: %w", member, e.Type, err)
	}
	return e.Payload[:from] + pt + e.Payload[to:], nil
}

// memberSpan finds the value of the top-level member name of the JSON
// object text p: p[from:to] is the value. ok is false when p is not a
// valid JSON object or has no such member.
func memberSpan(p, name string) (from, to int, ok bool) {
	i := jsonscan.SkipSpace(p, 0)
	if i >= len(p) || p[i] != '{' || !json.Valid([]byte(p)) {
		return 0, 0, false
	}
	for i = jsonscan.SkipSpace(p, i+1); i < len(p) && p[i] == '"'; {
		end := jsonscan.StringEnd(p, i)
		key, _ := jsonscan.String([]byte(p[i:end]))
		from = jsonscan.SkipSpace(p, jsonscan.SkipSpace(p, end)+1) // past ':'
		to = jsonscan.ValueEnd(p, from)
		if key == name {
			return from, to, true
		}
		i = jsonscan.SkipSpace(p, to)
		if i >= len(p) || p[i] != ',' {
			break
		}
		i = jsonscan.SkipSpace(p, i+1)
	}
	return 0, 0, false
}
