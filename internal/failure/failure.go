// Package failure classifies errors into chartpin's exit statuses:
// 0 success, 1 a finding or a failed operation, 2 bad usage or bad input.
package failure

import "errors"

// ErrFindings marks a check that ran and found something (exit 1).
var ErrFindings = errors.New("findings")

type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// Input marks err as bad usage or bad input (exit 2). Nil stays nil.
func Input(err error) error {
	if err == nil {
		return nil
	}
	return inputError{err}
}

// IsInput reports whether err, or anything it wraps, was marked by Input.
func IsInput(err error) bool {
	var ie inputError
	return errors.As(err, &ie)
}

// Code is the exit status for err.
func Code(err error) int {
	switch {
	case err == nil:
		return 0
	case IsInput(err):
		return 2
	default:
		return 1
	}
}
