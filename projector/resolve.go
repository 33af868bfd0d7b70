package projector

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// LastRun is the reference that names the most recent workflow run (mode
// run: not a check, an ad hoc call or a replay). "last-check",
// "last-adhoc", "last-replay" and "last-run" name the most recent run of
// that mode.
const LastRun = "last"

// RunModes are the modes a run is recorded in: a workflow run (run or
// submit), a replay, a check --remote, an ad hoc mcp command.
var RunModes = []string{"run", "replay", "check", "adhoc"}

// lastMode is the mode a "last" reference names, or "" when ref is not one.
func lastMode(ref string) string {
	if ref == LastRun {
		return "run"
	}
	if m, ok := strings.CutPrefix(ref, LastRun+"-"); ok {
		for _, k := range RunModes {
			if m == k {
				return m
			}
		}
	}
	return ""
}

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
	return fmt.Sprintf("%s id prefix %q is ambiguous; it matches:\n  %s%s\n(give more of the id)", e.Kind, e.Prefix, strings.Join(e.Matches, "\n  "), more)
}

// ResolveRun turns what an operator typed into a run id: the full id, any
// unique prefix of it (with or without the "run-"/"replay-" kind), its
// short form (ShortRunIDs), "last" for the most recent workflow run, or
// "last-MODE" for the most recent run of a mode. No match wraps ErrUnknownRun; several
// return an *AmbiguousError. Every command that takes a run id calls it.
func ResolveRun(ctx context.Context, db *events.DB, ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty run id", ErrUnknownRun)
	}
	x := db.SQL()
	if mode := lastMode(ref); mode != "" {
		var ids []string
		if err := x.SelectContext(ctx, &ids, `SELECT e.run_id FROM events e JOIN runs r ON r.run_id = e.run_id
			WHERE e.seq = 1 AND r.mode = ? ORDER BY e.created_at DESC, e.run_id DESC LIMIT 1`, mode); err != nil {
			return "", &events.Error{Op: "resolve run", Path: db.Path(), Err: err}
		}
		if len(ids) == 0 {
			return "", fmt.Errorf("%w: no run of mode %s recorded yet (%q)", ErrUnknownRun, mode, ref)
		}
		return ids[0], nil
	}
	// The full id first: a full id is never ambiguous.
	if ok, err := db.RunExists(ctx, ref); err != nil {
		return "", err
	} else if ok {
		return ref, nil
	}
	// A prefix of the whole id, or of the part after "run-" / "replay-",
	// or a short form (a suffix of at least MinShortID hex digits); LIKE
	// with an escaped pattern reads the same on SQLite and PostgreSQL.
	var ids []string
	p := likeEscaper.Replace(ref)
	suffix := "-" // matches no id's end: a ref too short to be a short form
	if shortForm(ref) {
		suffix = "%" + p
	}
	err := x.SelectContext(ctx, &ids, `SELECT run_id FROM events WHERE seq = 1
		AND (run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\')
		ORDER BY created_at DESC, run_id DESC LIMIT ?`, p+"%", "run-"+p+"%", "replay-"+p+"%", suffix, maxMatches+1)
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
