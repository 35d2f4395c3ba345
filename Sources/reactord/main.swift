print("reactord")
