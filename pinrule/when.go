package pinrule

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Cond is a parsed `when:` condition: terms joined by &&, all must hold.
type Cond struct {
	Terms []Term
}

// Term compares one values path with a literal: Path Op Value.
type Term struct {
	Path string
	// Op is == or !=.
	Op string
	// Value is the literal; Kind says how to compare it.
	Value string
	// Kind is bool, int, float, null or str.
	Kind string
}

// ParseWhen parses `path == literal`, `path != literal`, `path` (== true)
// and `!path` (== false), joined by &&.
func ParseWhen(s string) (Cond, error) {
	var c Cond
	if strings.TrimSpace(s) == "" {
		return c, fmt.Errorf("empty condition")
	}
	for _, part := range strings.Split(s, "&&") {
		t, err := parseTerm(strings.TrimSpace(part))
		if err != nil {
			return Cond{}, fmt.Errorf("%q: %w; write e.g. serviceDbAccountsByEnv.prod == true", s, err)
		}
		c.Terms = append(c.Terms, t)
	}
	return c, nil
}

func parseTerm(s string) (Term, error) {
	if s == "" {
		return Term{}, fmt.Errorf("empty term")
	}
	for _, op := range []string{"==", "!="} {
		if l, r, ok := strings.Cut(s, op); ok {
			l, r = strings.TrimSpace(l), strings.TrimSpace(r)
			if err := ValidPath(l); err != nil {
				return Term{}, err
			}
			v, kind, err := literal(r)
			if err != nil {
				return Term{}, err
			}
			return Term{Path: l, Op: op, Value: v, Kind: kind}, nil
		}
	}
	if strings.ContainsAny(s, "=<>|") {
		return Term{}, fmt.Errorf("unsupported operator in %q (use == or !=, joined by &&)", s)
	}
	if p, ok := strings.CutPrefix(s, "!"); ok {
		p = strings.TrimSpace(p)
		if err := ValidPath(p); err != nil {
			return Term{}, err
		}
		return Term{Path: p, Op: "==", Value: "false", Kind: "bool"}, nil
	}
	if err := ValidPath(s); err != nil {
		return Term{}, err
	}
	return Term{Path: s, Op: "==", Value: "true", Kind: "bool"}, nil
}

func literal(s string) (value, kind string, err error) {
	switch {
	case s == "":
		return "", "", fmt.Errorf("missing value after the operator")
	case len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0]:
		return s[1 : len(s)-1], "str", nil
	case s == "true" || s == "false":
		return s, "bool", nil
	case s == "null" || s == "~":
		return "", "null", nil
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return s, "int", nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s, "float", nil
	}
	if strings.ContainsAny(s, " \t\"'") {
		return "", "", fmt.Errorf("value %q: quote strings with spaces", s)
	}
	return s, "str", nil
}

// Eval reports whether every term holds. get returns the values node at a
// path, or an error when it is absent. Fail closed: an absent path, a
// non-scalar value or a value of another type is an error, never "false".
func (c Cond) Eval(get func(path string) (*yaml.Node, error)) (bool, error) {
	for _, t := range c.Terms {
		n, err := get(t.Path)
		if err != nil {
			return false, fmt.Errorf("condition %s %s %s unreadable: %w", t.Path, t.Op, t.literalText(), err)
		}
		eq, err := t.equal(n)
		if err != nil {
			return false, fmt.Errorf("condition %s %s %s unreadable: %w", t.Path, t.Op, t.literalText(), err)
		}
		if eq != (t.Op == "==") {
			return false, nil
		}
	}
	return true, nil
}

func (t Term) literalText() string {
	if t.Kind == "str" {
		return strconv.Quote(t.Value)
	}
	if t.Kind == "null" {
		return "null"
	}
	return t.Value
}

func (t Term) equal(n *yaml.Node) (bool, error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return false, fmt.Errorf("line %d: %s is not a scalar", n.Line, t.Path)
	}
	tag := n.ShortTag()
	switch t.Kind {
	case "bool":
		if tag != "!!bool" {
			return false, fmt.Errorf("line %d: %s is %q (%s), not a boolean", n.Line, t.Path, n.Value, tag)
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			return false, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return strconv.FormatBool(b) == t.Value, nil
	case "null":
		return tag == "!!null", nil
	case "int", "float":
		if tag != "!!int" && tag != "!!float" {
			return false, fmt.Errorf("line %d: %s is %q (%s), not a number", n.Line, t.Path, n.Value, tag)
		}
		var have, want float64
		if err := n.Decode(&have); err != nil {
			return false, fmt.Errorf("line %d: %w", n.Line, err)
		}
		want, _ = strconv.ParseFloat(t.Value, 64)
		return have == want, nil
	default:
		if tag == "!!null" {
			return false, fmt.Errorf("line %d: %s is null, not a string", n.Line, t.Path)
		}
		return n.Value == t.Value, nil
	}
}
