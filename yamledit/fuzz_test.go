package yamledit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzApply feeds arbitrary YAML through Parse, locates every scalar and
// rewrites one at a time: either Apply returns an error and no bytes, or
// every byte outside the written value is the original byte and the value
// reads back.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		"a: 1\n", "digest: \"\" # pin\n", "digest:\n", "a: &x v\nb: *x\n", "a: {b: c, d: [e, 'f']}\n",
		"a: 1\r\nb: 'x'\r\n\r\n", "\ufeffa: ü\n", "---\na: 1\n---\nb: ~\n", "a:\t# c\n", "- a\n-\n- 'b'\n",
		"a: |\n  x\n", "a: x\n  y\n", "? a\n: b\n", "a: !!str 1\n", "{a: , b}\n", "a: \"x\\\n  y\"\n",
	} {
		f.Add([]byte(s), uint16(0), "sha256:0123")
	}
	// Snippets of real values.yaml files: 40 lines from a few offsets.
	names, _ := filepath.Glob("testdata/corpus/*.values.yaml")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		for at := 0; at < len(lines); at += len(lines)/3 + 1 {
			end := min(at+40, len(lines))
			f.Add([]byte(strings.Join(lines[at:end], "")), uint16(at), "v1.2.3")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, pick uint16, value string) {
		orig := bytes.Clone(data)
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		nodes := scalars(file)
		if len(nodes) == 0 {
			return
		}
		// Every scalar must be locatable or refused; one is rewritten.
		for _, n := range nodes {
			s, err := file.Scalar(n)
			if err != nil {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("%s: %v", file.Pos(n), err)
				}
				continue
			}
			if s.Start < 0 || s.End < s.Start || s.End > len(data) {
				t.Fatalf("%s: span %d-%d outside the file", file.Pos(n), s.Start, s.End)
			}
		}
		n := nodes[int(pick)%len(nodes)]
		s, _ := file.Scalar(n)
		out, err := file.Apply(Edit{Node: n, Value: value})
		if !bytes.Equal(data, orig) {
			t.Fatal("Apply modified its input")
		}
		if err != nil {
			if out != nil {
				t.Fatal("bytes returned with an error")
			}
			return
		}
		end := outside(t, data, out, s)
		g, err := Parse("out.yaml", out)
		if err != nil {
			t.Fatalf("output does not parse: %v\n%q", err, out)
		}
		// The same node, in document order, reads the new value.
		after := scalars(g)
		if len(after) != len(nodes) {
			t.Fatalf("%d scalars became %d", len(nodes), len(after))
		}
		for i := range nodes {
			want := nodes[i].Value
			if nodes[i] == n {
				want = value
			}
			if after[i].Value != want {
				t.Fatalf("scalar %d reads %q, want %q\n%q", i, after[i].Value, want, out)
			}
		}

		// Two edits at once compose: the result is each single edit's
		// written bytes in the original around them.
		n2 := nodes[(int(pick)*31+7)%len(nodes)]
		s2, err := file.Scalar(n2)
		if err != nil || n2 == n {
			return
		}
		out2, err := file.Apply(Edit{Node: n2, Value: value + "2"})
		if err != nil {
			return
		}
		end2 := outside(t, data, out2, s2)
		both, err := file.Apply(Edit{Node: n, Value: value}, Edit{Node: n2, Value: value + "2"})
		if err != nil {
			return
		}
		a, b := s.Start, end
		x := out[a : len(out)-(len(data)-b)]
		c, d := s2.Start, end2
		y := out2[c : len(out2)-(len(data)-d)]
		if c < a {
			a, b, x, c, d, y = c, d, y, a, b, x
		}
		if b > c {
			return // adjacent empty slots sharing a blank
		}
		want := string(data[:a]) + string(x) + string(data[b:c]) + string(y) + string(data[d:])
		if string(both) != want {
			t.Fatalf("two edits do not compose:\n%q\n%q", both, want)
		}
	})
}

// outside checks that out differs from data only inside s's span (an empty
// slot may take the blank after the colon as its own) and returns the
// span's end in data.
func outside(t *testing.T, data, out []byte, s Scalar) int {
	t.Helper()
	end := s.End
	if s.Start == s.End && end < len(data) && isBlank(data, end) {
		end++
	}
	if !bytes.HasPrefix(out, data[:s.Start]) || !bytes.HasSuffix(out, data[end:]) || len(out)-(len(data)-end) < s.Start {
		t.Fatalf("bytes outside %d-%d changed:\n%q\n%q", s.Start, s.End, data, out)
	}
	return end
}
