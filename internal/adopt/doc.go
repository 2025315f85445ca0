// Package adopt writes the change to Git that adopts a hand edit: for the drifted fields of live
// objects, a strategic-merge patch per object in overlays/<env>/ (adopt-<kind>-<name>.yaml,
// created or merged into) listed in the overlay's kustomization, rendered as a unified diff that
// `git apply` accepts on the audited revision. Rendered with the change, each adopted field
// equals its live value; fields a patch cannot express are returned as notes.
//
// It edits files as text (the kustomization as lines, so comments and order stay) and reads the
// repository only through a ReadFunc: it never touches a work tree.
package adopt
