package doccheck

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// abbreviations end with a period that never ends a sentence.
var abbreviations = []string{"e.g.", "i.e.", "cf.", "vs.", "etc.", "approx.", "resp.", "no.", "fig."}

// Sentences splits prose into sentences. A sentence ends at '.', '!' or '?' (closing brackets,
// quotes and emphasis may follow) before a space and a next word that does not start in lower
// case. Nothing inside an inline code span ends a sentence, and neither does a period of an
// abbreviation such as "e.g." or of a number such as "0.3".
func Sentences(text string) []string {
	var out []string
	runes := []rune(text)
	start, code := 0, 0 // code: the length of the backtick run that opened the span, 0 outside
	for i := 0; i < len(runes); i++ {
		if runes[i] == '`' {
			j := i
			for j < len(runes) && runes[j] == '`' {
				j++
			}
			switch run := j - i; {
			case code == 0:
				code = run
			case code == run:
				code = 0
			}
			i = j - 1
			continue
		}
		if code != 0 || !strings.ContainsRune(".!?", runes[i]) {
			continue
		}
		end := i + 1
		for end < len(runes) && strings.ContainsRune(`)]"'’”*_`, runes[end]) {
			end++
		}
		if end < len(runes) && !unicode.IsSpace(runes[end]) {
			continue
		}
		next := end
		for next < len(runes) && unicode.IsSpace(runes[next]) {
			next++
		}
		if next < len(runes) && unicode.IsLower(runes[next]) {
			continue
		}
		if runes[i] == '.' && isAbbreviation(runes[start:i+1]) {
			continue
		}
		if s := strings.TrimSpace(string(runes[start:end])); s != "" {
			out = append(out, s)
		}
		start = end
	}
	if s := strings.TrimSpace(string(runes[start:])); s != "" {
		out = append(out, s)
	}
	return out
}

// isAbbreviation says whether the text up to a period ends with a known abbreviation.
func isAbbreviation(upTo []rune) bool {
	fields := strings.Fields(string(upTo))
	if len(fields) == 0 {
		return false
	}
	last := strings.ToLower(strings.TrimLeft(fields[len(fields)-1], `("'*_`))
	return slices.Contains(abbreviations, last)
}

var (
	codeSpan = regexp.MustCompile("(`+)[^`]*?(`+)")
	link     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// Words counts the words of a sentence. An inline code span is one word, as a reader takes in a
// name or a command whole; a link counts the words of its text, not its target. A token
// without a letter or a digit ("—", "→", "+") is no word.
func Words(sentence string) int {
	s := codeSpan.ReplaceAllString(sentence, " code ")
	s = link.ReplaceAllString(s, " $1 ")
	n := 0
	for _, f := range strings.Fields(s) {
		if strings.IndexFunc(f, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 {
			n++
		}
	}
	return n
}

// Median is the median of counts (the mean of the middle two for an even number), 0 for none.
func Median(counts []int) float64 {
	if len(counts) == 0 {
		return 0
	}
	c := slices.Clone(counts)
	sort.Ints(c)
	m := len(c) / 2
	if len(c)%2 == 1 {
		return float64(c[m])
	}
	return float64(c[m-1]+c[m]) / 2
}

// SentenceLengths returns the word count of every sentence of every prose paragraph of md.
func SentenceLengths(md string) []int {
	var out []int
	for _, p := range Paragraphs(md) {
		for _, s := range Sentences(p.Text) {
			if n := Words(s); n > 0 {
				out = append(out, n)
			}
		}
	}
	return out
}
