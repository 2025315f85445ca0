// Package doccheck measures how readable the project's Markdown is. It splits a document into
// prose paragraphs (code, tables and headings left out), a paragraph into sentences and a
// sentence into words, so a test can hold the README to short sentences and short paragraphs.
// It also finds what a reader of the forge cannot follow: issue numbers, commit hashes and
// relative links to files that do not exist.
//
// It reads text only: no file system, no network. The tests beside it read the documents.
package doccheck
