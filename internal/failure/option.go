package failure

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
)

// A library names the options a caller set by their Go field names, never by
// a command line's flags: an OptionError's format marks each field as
// {{Field}}. Its message reads "PrereleaseIndex x: …" for a Go caller, and
// a command line renders the same error with its flags (Render).
type OptionError struct {
	format string
	args   []any
	err    error // the error with field names, which errors.Is and As see through
}

var fieldMarker = regexp.MustCompile(`\{\{([A-Za-z][A-Za-z0-9]*)\}\}`)

// Optionf is fmt.Errorf whose format names option fields as {{Field}}.
func Optionf(format string, args ...any) error {
	e := &OptionError{format: format, args: args}
	e.err = e.render(func(field string) string { return field })
	return e
}

// Error spells the fields as SpellFields says (their Go names by default),
// so an error that ends up in a report reads like the one on stderr.
func (e *OptionError) Error() string {
	if name := spelling.Load(); name != nil {
		return e.render(*name).Error()
	}
	return e.err.Error()
}

// spelling is the program's way to name option fields (nil: Go field names).
var spelling atomic.Pointer[func(field string) string]

// SpellFields makes every OptionError's message name its fields as
// name(field), e.g. a command line's flags. A program calls it once, at
// start-up; libraries never do. nil restores the Go field names.
func SpellFields(name func(field string) string) {
	if name == nil {
		spelling.Store(nil)
		return
	}
	spelling.Store(&name)
}
func (e *OptionError) Unwrap() error { return e.err }

// render is the error with each field marker replaced by name(field); only
// the format is rewritten, never the values the message quotes.
func (e *OptionError) render(name func(field string) string) error {
	f := fieldMarker.ReplaceAllStringFunc(e.format, func(m string) string {
		return strings.ReplaceAll(name(fieldMarker.FindStringSubmatch(m)[1]), "%", "%%")
	})
	return fmt.Errorf(f, e.args...)
}

// Render is err's message with the option fields of every OptionError it
// wraps spelled as name(field), e.g. "PrereleaseIndex" as "--prerelease-index".
func Render(err error, name func(field string) string) string {
	msg := err.Error()
	for _, oe := range optionErrors(err) {
		msg = strings.Replace(msg, oe.Error(), oe.render(name).Error(), 1)
	}
	return msg
}

// optionErrors lists the OptionErrors in err's tree, outermost first.
func optionErrors(err error) []*OptionError {
	var out []*OptionError
	var walk func(error)
	walk = func(err error) {
		for err != nil {
			if oe, ok := err.(*OptionError); ok {
				out = append(out, oe)
				return // its own message holds whatever it wraps
			}
			switch u := err.(type) {
			case interface{ Unwrap() []error }:
				for _, e := range u.Unwrap() {
					walk(e)
				}
				return
			default:
				err = errors.Unwrap(err)
			}
		}
	}
	walk(err)
	return out
}
