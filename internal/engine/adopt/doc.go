// Package adopt writes the change to Git that adopts a hand edit: for the drifted fields of live
// objects, a strategic-merge patch per object in overlays/<env>/ (adopt-<kind>-<name>.yaml,
// created or merged into) listed in the overlay's kustomization, rendered as a unified diff that
// `git apply` accepts on the audited revision. Rendered with the change, each adopted field
// equals its live value; fields a patch cannot express are returned as notes.
//
// An object an Application renders with its own options (a Helm chart of the repository, its
// kustomize options, several sources) is adopted into those options instead (GroupIn): the one
// chart value, kustomize image or replica count that, set to the live value, makes the render
// say it and changes nothing else, written where Argo CD takes it from (a parameter, a value
// file, the Application's values or valuesObject in the manifest that declares it).
//
// It edits files as text (the kustomization as lines, YAML values where they are written, so
// comments and order stay) and reads the repository only through a ReadFunc or a snapshot of a
// tree: it never touches a work tree.
package adopt
