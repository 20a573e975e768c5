// Package limits holds kvd's size limits as constants, so that every
// package that checks or provisions for them uses the same numbers: a
// limit checked when an entry is applied must be the same on every node.
package limits
