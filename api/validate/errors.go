package validate

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxErrors is how many field errors one request reports; the others are only counted, so
// the answer to a bad request stays small however large the request is.
const MaxErrors = 10

// maxQuoted bounds a value or field name repeated in an error message.
const maxQuoted = 80

// Errors collects the first MaxErrors field errors; validators stop once it is Full.
type Errors struct {
	list []string
	more int
}

// Add records an error of field. String arguments longer than a few dozen characters are
// cut, so an error never repeats a large part of the request.
func (e *Errors) Add(field, format string, args ...any) {
	if len(e.list) >= MaxErrors {
		e.more++
		return
	}
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = cut(s)
		}
	}
	e.list = append(e.list, cut(field)+": "+fmt.Sprintf(format, args...))
}

func (e *Errors) add(field, format string, args ...any) { e.Add(field, format, args...) }

// Full reports that no more errors will be listed: validation can stop.
func (e *Errors) Full() bool { return len(e.list) >= MaxErrors }

// Len is the number of errors found, listed or not.
func (e *Errors) Len() int { return len(e.list) + e.more }

// Err returns nil when there are no errors, else one error listing the first MaxErrors and
// counting the others.
func (e *Errors) Err() error {
	if len(e.list) == 0 {
		return nil
	}
	msg := strings.Join(e.list, "; ")
	if len(e.list) >= MaxErrors {
		// Validation stops at the cap, so the rest is not counted: say so.
		msg += fmt.Sprintf("; and possibly more: only the first %d errors are reported", MaxErrors)
	}
	return errors.New(msg)
}

// cut shortens s to maxQuoted bytes (on a rune boundary), saying how long it was.
func cut(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}
