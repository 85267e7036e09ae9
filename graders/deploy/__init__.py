"""Deployment: many submissions (`grade batch`, its fork server and Docker backend) and Gradescope
(the autograder bundle and what its run_autograder runs)."""
