package projector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// LastRun is the reference that names the most recent run.
const LastRun = "last"

// ErrUnknownEffect is returned for a call (effect) id that matches no call.
var ErrUnknownEffect = errors.New("unknown call")

// maxMatches bounds how many candidates an ambiguous prefix lists.
const maxMatches = 10

// AmbiguousError is a prefix that names more than one run or call: the
// operator picks one of Matches (at most maxMatches are listed).
type AmbiguousError struct {
	Kind    string // "run" or "call"
	Prefix  string
	Matches []string
	More    bool // more matches than listed
}

func (e *AmbiguousError) Error() string {
	more := ""
	if e.More {
		more = "\n  …"
	}
	return fmt.Sprintf("%s id prefix %q is ambiguous; it matches:\n  %s%s", e.Kind, e.Prefix, strings.Join(e.Matches, "\n  "), more)
}

// ResolveRun turns what an operator typed into a run id: the full id, any
// unique prefix of it (with or without the "run-"/"replay-" kind), or
// "last" for the most recent run. No match wraps ErrUnknownRun; several
// return an *AmbiguousError. Every command that takes a run id calls it.
func ResolveRun(ctx context.Context, db *events.DB, ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty run id", ErrUnknownRun)
	}
	x := db.SQL()
	if ref == LastRun {
		var ids []string
		if err := x.SelectContext(ctx, &ids, `SELECT run_id FROM events WHERE seq = 1 ORDER BY created_at DESC, run_id DESC LIMIT 1`); err != nil {
			return "", &events.Error{Op: "resolve run", Path: db.Path(), Err: err}
		}
		if len(ids) == 0 {
			return "", fmt.Errorf("%w: no runs recorded yet (%q)", ErrUnknownRun, ref)
		}
		return ids[0], nil
	}
	// The full id first: a full id is never ambiguous.
	if ok, err := db.RunExists(ctx, ref); err != nil {
		return "", err
	} else if ok {
		return ref, nil
	}
	// A prefix of the whole id, or of the part after "run-" / "replay-";
	// LIKE with an escaped pattern reads the same on SQLite and PostgreSQL.
	var ids []string
	p := likeEscaper.Replace(ref)
	err := x.SelectContext(ctx, &ids, `SELECT run_id FROM events WHERE seq = 1
		AND (run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\')
		ORDER BY created_at DESC, run_id DESC LIMIT ?`, p+"%", "run-"+p+"%", "replay-"+p+"%", maxMatches+1)
	if err != nil {
		return "", &events.Error{Op: "resolve run", Path: db.Path(), Err: err}
	}
	return pick("run", ref, ids, ErrUnknownRun)
}

// ResolveEffect turns a call (effect) id or a unique prefix of one into
// the full id, with the run it belongs to. No match wraps
// ErrUnknownEffect; several return an *AmbiguousError.
func ResolveEffect(ctx context.Context, db *events.DB, ref string) (effectID, runID string, err error) {
	if ref == "" {
		return "", "", fmt.Errorf("%w: empty call id", ErrUnknownEffect)
	}
	var rows []struct {
		EffectID string `db:"effect_id"`
		RunID    string `db:"run_id"`
	}
	// Call ids are lower-case hex.
	ref = strings.ToLower(ref)
	err = db.SQL().SelectContext(ctx, &rows, `SELECT effect_id, run_id FROM protocol_calls
		WHERE effect_id LIKE ? ESCAPE '\' ORDER BY effect_id LIMIT ?`, likeEscaper.Replace(ref)+"%", maxMatches+1)
	if err != nil {
		return "", "", &events.Error{Op: "resolve call", Path: db.Path(), Err: err}
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.EffectID
	}
	id, err := pick("call", ref, ids, ErrUnknownEffect)
	if err != nil {
		return "", "", err
	}
	for _, r := range rows {
		if r.EffectID == id {
			return id, r.RunID, nil
		}
	}
	return id, "", nil
}

// likeEscaper escapes LIKE's wildcards (and its escape character) in an id
// prefix, so a prefix matches only itself.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// pick returns the one match, or the error that says why there is not one.
func pick(kind, ref string, ids []string, unknown error) (string, error) {
	switch {
	case len(ids) == 1:
		return ids[0], nil
	case len(ids) == 0:
		return "", fmt.Errorf("%w: no %s id starts with %q", unknown, kind, ref)
	}
	for _, id := range ids {
		if id == ref {
			return id, nil
		}
	}
	e := &AmbiguousError{Kind: kind, Prefix: ref, Matches: ids}
	if len(ids) > maxMatches {
		e.Matches, e.More = ids[:maxMatches], true
	}
	return "", e
}
