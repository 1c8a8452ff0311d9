package model

// llamaFamily is Llama 1-3 and Mistral (which converters write under
// either name): the generic block, nothing to add.
var llamaFamily = family{
	names: []string{"llama", "mistral"},
}
