"""The contracts other programs read: metric families (names, types, help) and archive records."""
