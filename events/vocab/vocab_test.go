package vocab_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
)

// constants returns every Type* constant declared in the package's
// non-test sources, by value.
func constants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Type") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s is not a string literal", id.Name)
					}
					v, _ := strconv.Unquote(lit.Value)
					out[id.Name] = v
				}
			}
		}
	}
	return out
}

// fill sets every field of v to a non-zero value, so that a member the
// JSON loses or renames shows in the comparison.
func fill(v reflect.Value, seed string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(seed + "-é<&>")
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(seed)) + 3)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), seed+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"k":[1,"` + seed + `"]}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), seed)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), seed+strconv.Itoa(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(seed))
		v.Set(m)
	}
}

// TestEveryTypeHasPayload holds the dispatch to the constants: an event
// type added without its payload struct fails here.
func TestEveryTypeHasPayload(t *testing.T) {
	consts := constants(t)
	if len(consts) < 20 {
		t.Fatalf("found %d Type constants, want the whole vocabulary", len(consts))
	}
	types := vocab.Types()
	for name, v := range consts {
		if !slices.Contains(types, v) {
			t.Errorf("%s (%q) has no payload type in vocab.Payload", name, v)
		}
	}
	if len(types) != len(consts) {
		t.Errorf("Payload dispatches %d types, the package declares %d constants", len(types), len(consts))
	}
}

// TestPayloadRoundTrips appends a filled payload of every type (and a
// frame) to a database, in clear and sealed, and reads it back through
// vocab.Payload: the same struct, and the stored JSON is what
// encoding/json writes for it.
func TestPayloadRoundTrips(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t, "", events.Options{})
	types := append(vocab.Types(), vocab.FramePrefix+"request")
	slices.Sort(types)
	var recs []events.Record
	var want []any
	for _, typ := range types {
		probe, err := vocab.Payload(events.Event{Type: typ, Payload: "{}"})
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		v := reflect.New(reflect.TypeOf(probe)).Elem()
		fill(v, typ)
		stream := "run"
		if strings.HasPrefix(typ, "call.") || vocab.IsFrame(typ) {
			stream = "call/x"
		}
		recs = append(recs, events.Record{Stream: stream, Type: typ, Payload: v.Interface()})
		want = append(want, v.Interface())
	}
	check := func(run string) {
		evs, err := db.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(want) {
			t.Fatalf("%s: %d events, want %d", run, len(evs), len(want))
		}
		for i, e := range evs {
			got, err := vocab.Payload(e)
			if err != nil {
				t.Fatalf("%s seq %d %s: %v", run, e.Seq, e.Type, err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Errorf("%s %s:\n got %#v\nwant %#v", run, e.Type, got, want[i])
			}
			plain, err := e.Plaintext()
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := json.Marshal(want[i])
			if !strings.Contains(plain, `"`) || canonical(t, plain) != canonical(t, string(ref)) {
				t.Errorf("%s %s stored %s, encoding/json writes %s", run, e.Type, plain, ref)
			}
		}
	}
	if _, err := db.Append(ctx, "run-plain", recs, nil); err != nil {
		t.Fatal(err)
	}
	check("run-plain")

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	if err := db.EnableEncryption(ctx, "k1", key); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(ctx, "run-sealed", recs, nil); err != nil {
		t.Fatal(err)
	}
	check("run-sealed")
	if _, err := vocab.Payload(events.Event{Type: "call.nonsense", Payload: "{}"}); err == nil {
		t.Fatal("Payload of an unknown type: no error")
	}
}

// canonical re-encodes a JSON text with sorted keys and no HTML escapes.
func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestNoHandDecodeOutsideVocab: outside events and events/vocab, no
// non-test source calls Decode on anything but a json or yaml decoder (or
// a yaml.Node): event payloads are decoded by vocab.Decode/vocab.Payload.
func TestNoHandDecodeOutsideVocab(t *testing.T) {
	root := filepath.Join("..", "..")
	var checked int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", "vocab":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == filepath.Join(root, "events") {
			return nil
		}
		checked++
		for _, bad := range handDecodes(t, path) {
			t.Errorf("%s: decodes an event payload by hand (%s); use vocab.Decode or vocab.Payload", path, bad)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files, want the module's sources", checked)
	}
}

// handDecodes lists the X.Decode(...) calls of a file whose receiver X is
// not a json/yaml decoder or a yaml.Node declared in the same file.
func handDecodes(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{}
	isNode := func(e ast.Expr) bool {
		if s, isStar := e.(*ast.StarExpr); isStar {
			e = s.X
		}
		sel, isSel := e.(*ast.SelectorExpr)
		return isSel && sel.Sel.Name == "Node"
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, r := range n.Rhs {
				if c, isCall := r.(*ast.CallExpr); isCall && i < len(n.Lhs) {
					if sel, isSel := c.Fun.(*ast.SelectorExpr); isSel && sel.Sel.Name == "NewDecoder" {
						if id, isID := n.Lhs[i].(*ast.Ident); isID {
							ok[id.Name] = true
						}
					}
				}
			}
		case *ast.Field:
			if isNode(n.Type) {
				for _, id := range n.Names {
					ok[id.Name] = true
				}
			}
		case *ast.ValueSpec:
			if n.Type != nil && isNode(n.Type) {
				for _, id := range n.Names {
					ok[id.Name] = true
				}
			}
		}
		return true
	})
	imported := map[string]bool{}
	for _, im := range f.Imports {
		name := strings.Trim(im.Path.Value, `"`)
		name = name[strings.LastIndex(name, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imported[name] = true
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		c, isCall := n.(*ast.CallExpr)
		if !isCall {
			return true
		}
		sel, isSel := c.Fun.(*ast.SelectorExpr)
		if !isSel || sel.Sel.Name != "Decode" {
			return true
		}
		if id, isID := sel.X.(*ast.Ident); isID && (ok[id.Name] || imported[id.Name]) {
			return true // a decoder, a yaml.Node, or a package's Decode (pem.Decode)
		}
		if inner, isCall := sel.X.(*ast.CallExpr); isCall { // json.NewDecoder(r).Decode(&v)
			if s, isS := inner.Fun.(*ast.SelectorExpr); isS && s.Sel.Name == "NewDecoder" {
				return true
			}
		}
		if ix, isIx := sel.X.(*ast.IndexExpr); isIx { // n.Content[i]
			if s, isS := ix.X.(*ast.SelectorExpr); isS && s.Sel.Name == "Content" {
				return true
			}
		}
		bad = append(bad, fset.Position(c.Pos()).String())
		return true
	})
	return bad
}
