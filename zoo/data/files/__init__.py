"""A user's own data files: read as lines, csv / tsv rows, records and tables, and the splits read from them."""
