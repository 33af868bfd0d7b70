package projector

import (
	"context"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// MinShortID is the length of a run's short form: the last hex digits of
// its id (random bits of the uuidv7, where the leading ones are a
// timestamp that runs started close together share).
const MinShortID = 8

// ShortRunIDs returns the short form of each of ids that human output
// prints: the shortest suffix of the id, at least MinShortID characters,
// that ResolveRun resolves to that run alone among the runs recorded now
// (no other id ends with it, and no other id's uuid starts with it). An
// id with no such suffix (never seen: 48 random bits collide) maps to
// itself.
func ShortRunIDs(ctx context.Context, db *events.DB, ids []string) (map[string]string, error) {
	var all []string
	if err := db.SQL().SelectContext(ctx, &all, `SELECT run_id FROM events WHERE seq = 1`); err != nil {
		return nil, &events.Error{Op: "list run ids", Path: db.Path(), Err: err}
	}
	uuids := make([]string, len(all)) // the part after the kind, sorted: a prefix is a range
	for i, id := range all {
		uuids[i] = uuidPart(id)
	}
	sort.Strings(uuids)
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		out[id] = id
		for n := MinShortID; n < len(id); n++ {
			s := id[len(id)-n:]
			if strings.HasPrefix(s, "-") {
				continue
			}
			if countSuffix(all, s) == 1 && countPrefix(uuids, s) == 0 {
				out[id] = s
				break
			}
		}
	}
	return out, nil
}

// ShortRunID is ShortRunIDs for one id, without reading every run id:
// for each candidate suffix it asks only for the ids it could be taken for
// (those ending with it, or whose id or uuid starts with it; most often
// none but id itself) and applies ShortRunIDs's test to them. `agentctl
// run` prints it as a run starts, and read the ShortRunIDs way it cost each
// run time and memory in the number of runs recorded (BENCHMARKS.md,
// session 16).
func ShortRunID(ctx context.Context, db *events.DB, id string) (string, error) {
	for n := MinShortID; n < len(id); n++ {
		s := id[len(id)-n:]
		if strings.HasPrefix(s, "-") {
			continue
		}
		// LIKE may match more than the test below counts (SQLite's ignores
		// case), never less.
		p := likeEscaper.Replace(s)
		var near []string
		if err := db.SQL().SelectContext(ctx, &near, `SELECT run_id FROM events WHERE seq = 1
			AND (run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\' OR run_id LIKE ? ESCAPE '\')`,
			"%"+p, p+"%", "run-"+p+"%", "replay-"+p+"%"); err != nil {
			return "", &events.Error{Op: "short run id", Path: db.Path(), Err: err}
		}
		uuids := make([]string, len(near))
		for i, r := range near {
			uuids[i] = uuidPart(r)
		}
		sort.Strings(uuids)
		if countSuffix(near, s) == 1 && countPrefix(uuids, s) == 0 {
			return s, nil
		}
	}
	return id, nil
}

// uuidPart is a run id without its kind ("run-", "replay-").
func uuidPart(id string) string {
	if k, rest, ok := strings.Cut(id, "-"); ok && (k == "run" || k == "replay") {
		return rest
	}
	return id
}

func countSuffix(ids []string, s string) int {
	n := 0
	for _, id := range ids {
		if strings.HasSuffix(id, s) {
			n++
		}
	}
	return n
}

// countPrefix counts the sorted uuids that start with p.
func countPrefix(sorted []string, p string) int {
	i := sort.SearchStrings(sorted, p)
	n := 0
	for ; i < len(sorted) && strings.HasPrefix(sorted[i], p); i++ {
		n++
	}
	return n
}

// shortForm reports whether ref can be a short form (a suffix of an id):
// at least MinShortID characters of lower-case hex and dashes.
func shortForm(ref string) bool {
	if len(ref) < MinShortID {
		return false
	}
	for _, c := range ref {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}
