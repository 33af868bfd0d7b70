package projector

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// SealedText stands, in a projection column, for text taken from a sealed
// (encrypted) payload: an error message or a server's info carries remote
// data, and the tables are not encrypted. Inspect, which reads the log with
// the key, shows the text itself; `runs list` and a reader of the bare
// database see only this marker.
const SealedText = "[sealed]"

// clearText is s as a projection column may hold it: the marker when e's
// payload is sealed, s otherwise.
func clearText(e events.Event, s string) string {
	if s != "" && e.Sealed() {
		return SealedText
	}
	return s
}

// clearJSON is clearText for a JSON column: the marker when e's payload
// is sealed, remoteJSON(raw) otherwise.
func clearJSON(e events.Event, raw json.RawMessage) string {
	if len(raw) > 0 && e.Sealed() {
		return strconv.Quote(SealedText)
	}
	return remoteJSON(raw)
}

// remoteJSON is the text a projection column keeps of JSON raw as a peer
// sent it: the bytes the log stores for it. The payload encoder compacts
// a json.RawMessage (whitespace outside strings removed, keys in their
// order, string escapes and HTML characters kept as sent), which is what
// json.Compact does. The live projection folds the value the run held
// (raw as received) and a rebuild the payload decoded from the log
// (already compact); both go through this function, so they write the
// same row.
func remoteJSON(raw json.RawMessage) string {
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return string(raw) // nothing to remove: compact already
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw) // not JSON: the payload could not have held it
	}
	return b.String()
}

// unsealer collects, while inspect scans the log with the key, the texts
// that sealed payloads put in projection columns as SealedText, and puts
// them back in the document: what the projector would have written in
// clear.
type unsealer struct {
	runErr     *string           // nil: no sealed run.finished read
	taskErr    map[string]string // "task/attempt" → error
	callErr    map[string]string // effect id → error
	serverInfo map[string]json.RawMessage
}

func sessionKey(remote string, gen int) string { return remote + "/" + strconv.Itoa(gen) }

// add folds e as the projector does for the columns it seals. Without the
// key (inspect of a run whose sealed events it does not otherwise read)
// the column keeps its marker: inspect shows less, and reveals nothing.
func (u *unsealer) add(e events.Event) error {
	if e.Type == vocab.TypeRunResumed {
		u.runErr = nil
	}
	if !e.Sealed() {
		return nil
	}
	if err := u.fold(e); err != nil && !errors.Is(err, events.ErrKeyRequired) {
		return err
	}
	return nil
}

func (u *unsealer) fold(e events.Event) error {
	if u.taskErr == nil {
		u.taskErr, u.callErr, u.serverInfo = map[string]string{}, map[string]string{}, map[string]json.RawMessage{}
	}
	switch e.Type {
	case vocab.TypeRunFinished:
		p, err := vocab.Decode[vocab.RunFinished](e)
		if err != nil {
			return err
		}
		u.runErr = &p.Error
	case vocab.TypeTaskFinished:
		p, err := vocab.Decode[vocab.TaskFinished](e)
		if err != nil {
			return err
		}
		u.taskErr[p.TaskID+"/"+strconv.Itoa(p.Attempt)] = p.Error
	case vocab.TypeCallTransition, vocab.TypeCallResult, vocab.TypeCallReconciled, vocab.TypeCallTaskAccepted, vocab.TypeCallTaskStatus, vocab.TypeCallTaskCancel:
		p, err := vocab.Payload(e)
		if err != nil {
			return err
		}
		u.moved(p)
	case vocab.TypeCallError:
		p, err := vocab.Decode[vocab.CallError](e)
		if err != nil {
			return err
		}
		u.callErr[p.EffectID] = p.Kind + ": " + p.Message
		u.moved(p)
	case vocab.TypeSessionOpened:
		p, err := vocab.Decode[vocab.SessionOpened](e)
		if err != nil {
			return err
		}
		u.serverInfo[sessionKey(p.Remote, p.Generation)] = p.ServerInfo
	}
	return nil
}

// moved folds the move a call fact carries (or a call.transition) as the
// projector's COALESCE(error, reason) does.
func (u *unsealer) moved(p any) {
	t, ok := vocab.MoveOf(p)
	if !ok {
		return
	}
	if _, ok := u.callErr[t.EffectID]; !ok && t.Reason != "" && (t.To == "failed" || t.To == "uncertain" || t.To == "cancelled") {
		u.callErr[t.EffectID] = t.Reason
	}
}

// patch replaces each SealedText of doc by the text the log holds.
func (u *unsealer) patch(doc *Document) {
	if u.taskErr == nil {
		return
	}
	if r := doc.Run; r != nil && r.Error != nil && *r.Error == SealedText && u.runErr != nil {
		r.Error = strPtr(*u.runErr)
	}
	for i := range doc.Tasks {
		t := &doc.Tasks[i]
		if v, ok := u.taskErr[t.TaskID+"/"+strconv.Itoa(t.Attempt)]; ok && t.Error != nil && *t.Error == SealedText {
			t.Error = strPtr(v)
		}
	}
	for i := range doc.ProtocolCalls {
		c := &doc.ProtocolCalls[i]
		if v, ok := u.callErr[c.EffectID]; ok && c.Error != nil && strings.HasSuffix(*c.Error, SealedText) {
			c.Error = strPtr(v)
		}
	}
	for i := range doc.ProtocolSessions {
		s := &doc.ProtocolSessions[i]
		if v, ok := u.serverInfo[sessionKey(s.Remote, s.Generation)]; ok && string(s.ServerInfo) == strconv.Quote(SealedText) {
			s.ServerInfo = rawOrNull(strPtr(string(v)))
		}
	}
}
