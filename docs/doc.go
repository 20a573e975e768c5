// Package docs holds kvd's manuals, in Markdown, and no code. Its tests keep
// the manuals honest: the README stays short and links every manual, links
// resolve, no manual tells history, every flag is documented, every test
// docs/testing.md names exists, and every number docs/limits.md states is
// the code's (docs_test.go names the constant behind each row).
package docs
