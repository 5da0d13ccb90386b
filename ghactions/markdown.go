package ghactions

import "strings"

// Text escapes s for Markdown text and table cells: characters that would
// start markup, HTML or a new cell are escaped, line breaks become spaces.
func Text(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\r', '\n':
			b.WriteByte(' ')
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\\', '`', '*', '_', '[', ']', '|', '#', '~', '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Code renders s as inline code that survives inside a table cell: the fence
// is longer than any backtick run in s, "|" is escaped, line breaks shown as ⏎.
func Code(s string) string {
	if s == "" {
		return ""
	}
	s = strings.NewReplacer("\r\n", "⏎", "\r", "⏎", "\n", "⏎", "|", `\|`).Replace(s)
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}
