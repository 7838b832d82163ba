# plugin SDK and the hello example
