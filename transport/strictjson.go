package transport

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Every JSON document a server sends is read strictly, as RFC 7493 (I-JSON)
// and go-json-experiment read by default: a member name repeated anywhere in
// the document makes it malformed, and member names match exactly.
// encoding/json would keep the last of two "isError" members and let
// "STRUCTUREDCONTENT" fill structuredContent, so a hostile server could show
// agentctl one value and jq or Python (which read the first) another.

// lenientText keeps one leniency of encoding/json: an escaped lone
// surrogate ("\ud800", which JavaScript's JSON.stringify writes for a string
// cut inside a surrogate pair) is read as U+FFFD rather than refused. Raw
// bytes that are not UTF-8 are refused before (decodeMessage, httpError).
var lenientText = jsontext.AllowInvalidUTF8(true)

// strictValid reports, as a malformed error, why b is not one valid JSON
// value without repeated member names.
func strictValid(b []byte) error {
	if jsontext.Value(b).IsValid(lenientText) {
		return nil
	}
	d := jsontext.NewDecoder(bytes.NewReader(b), lenientText)
	_, err := d.ReadValue()
	var se *jsontext.SyntacticError
	switch {
	case err == nil:
		return malformed("invalid JSON: text after the value")
	case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
		where := ""
		if p := se.JSONPointer.Parent(); p != "" {
			where = fmt.Sprintf(" in %q", truncate(string(p), 100))
		}
		return malformed("duplicate member %q%s", truncate(se.JSONPointer.LastToken(), 64), where)
	}
	return malformed("invalid JSON: %s", truncate(strings.TrimPrefix(err.Error(), "jsontext: "), 200))
}

// strictUnmarshal decodes a JSON value from a server into v: member names
// match the struct's tags exactly, and a repeated member name is an error.
func strictUnmarshal(b []byte, v any) error {
	return jsonv2.Unmarshal(b, v, lenientText)
}
