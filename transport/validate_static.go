package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Violation is one place where a value breaks a schema: the JSON Pointer
// of the instance location and what is wrong there (schema text, which is
// remote data: sanitise before printing).
type Violation struct {
	Location string // JSON Pointer in the instance, "" for the root
	Message  string
}

// ArgumentViolations checks args against t's inputSchema with the
// validator and the bounds of ValidateArguments, for arguments only partly
// known before a run (agentctl check --remote): violations at or under a
// location in skip (JSON Pointers of values known only at run time) are
// dropped. err is a schema that does not compile or is over budget
// (KindSchemaTooComplex), as ValidateArguments would report it. Messages
// are redacted like ValidateArguments'.
func ArgumentViolations(t Tool, args json.RawMessage, skip []string) ([]Violation, error) {
	if !present(args) {
		args = []byte("{}")
	}
	op := "validate input"
	if !present(t.inputSchema()) {
		return nil, &Error{Op: op, Kind: KindInvalidArguments, Message: fmt.Sprintf("tool %q: no inputSchema", t.Name)}
	}
	cs, inst, err := prepare(t.Name, "input", op, KindInvalidArguments, t.inputSchema(), args)
	if err != nil {
		return nil, t.scrub(err)
	}
	err = cs.sch.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, t.scrub(&Error{Op: op, Kind: KindInvalidArguments, Message: fmt.Sprintf("tool %q: %v", t.Name, err)})
	}
	var out []Violation
	seen := map[Violation]bool{}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil || len(u.Errors) > 0 {
			continue
		}
		loc := u.InstanceLocation
		if loc == "/" {
			loc = ""
		}
		if underAny(loc, skip) {
			continue
		}
		v := Violation{Location: loc, Message: t.red.string(u.Error.String())}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// underAny reports whether JSON Pointer loc is one of prefixes or below one.
func underAny(loc string, prefixes []string) bool {
	for _, p := range prefixes {
		if loc == p || strings.HasPrefix(loc, p+"/") {
			return true
		}
	}
	return false
}
