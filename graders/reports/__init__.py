"""Reports: views of one `Results` (HTML, Gradescope's JSON, the console table) or of a batch
(the class summary). None of them grades anything."""
