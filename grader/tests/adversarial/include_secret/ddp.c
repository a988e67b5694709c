// An adversarial submission (grader test): includes a file that is not its
// own, so that the compiler's errors would quote it. Only diagnostics about
// the student's own file may reach the report.
#include "/etc/passwd"
